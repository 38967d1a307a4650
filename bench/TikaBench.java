// bench/bench_documents.py's Tika child: Apache Tika (tika-app, as StormCrawler's Tika bolt uses
// it) reads every PDF under a folder ROUNDS times in one warm JVM: the text (BodyContentHandler)
// and the links (LinkContentHandler), as StormCrawler's ParserBolt tees them. Prints one JSON
// line: documents, pages, wall and CPU seconds, characters, links, peak RSS (VmHWM).
//   java -cp tika-app-2.9.2.jar bench/TikaBench.java DIR ROUNDS
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Collectors;
import org.apache.tika.metadata.Metadata;
import org.apache.tika.parser.AutoDetectParser;
import org.apache.tika.parser.ParseContext;
import org.apache.tika.sax.BodyContentHandler;
import org.apache.tika.sax.LinkContentHandler;
import org.apache.tika.sax.TeeContentHandler;

public class TikaBench {
    static long[] readAll(AutoDetectParser parser, List<byte[]> docs) throws Exception {
        long pages = 0, chars = 0, links = 0;
        for (byte[] data : docs) {
            BodyContentHandler text = new BodyContentHandler(-1);
            LinkContentHandler link = new LinkContentHandler();
            Metadata md = new Metadata();
            parser.parse(new java.io.ByteArrayInputStream(data), new TeeContentHandler(text, link),
                    md, new ParseContext());
            String n = md.get("xmpTPg:NPages");
            pages += n == null ? 0 : Long.parseLong(n);
            chars += text.toString().length();
            links += link.getLinks().stream().map(l -> l.getUri()).distinct().count();
        }
        return new long[] {pages, chars, links};
    }

    static long hwmKb() throws Exception {
        for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
            if (line.startsWith("VmHWM:")) {
                return Long.parseLong(line.replaceAll("[^0-9]", ""));
            }
        }
        return -1;
    }

    public static void main(String[] args) throws Exception {
        List<byte[]> docs;
        try (var files = Files.walk(Path.of(args[0]))) {
            List<Path> pdfs = files.filter(p -> p.toString().endsWith(".pdf")).sorted()
                    .collect(Collectors.toList());
            docs = new java.util.ArrayList<>();
            for (Path p : pdfs) docs.add(Files.readAllBytes(p));
        }
        int rounds = Integer.parseInt(args[1]);
        AutoDetectParser parser = new AutoDetectParser();
        readAll(parser, docs); // warm-up: class loading and the JIT out of the figures
        var bean = ManagementFactory.getThreadMXBean();
        long c0 = bean.getCurrentThreadCpuTime(), t0 = System.nanoTime();
        long[] r = null;
        for (int i = 0; i < rounds; i++) r = readAll(parser, docs);
        double wall = (System.nanoTime() - t0) / 1e9;
        double cpu = (bean.getCurrentThreadCpuTime() - c0) / 1e9;
        System.out.printf("{\"library\": \"tika\", \"docs\": %d, \"pages\": %d, \"wall\": %.4f, "
                + "\"cpu\": %.4f, \"chars\": %d, \"links\": %d, \"peak_mb\": %.1f, "
                + "\"growth_mb\": -1}%n", docs.size() * rounds, r[0] * rounds, wall, cpu, r[1],
                r[2], hwmKb() / 1024.0);
    }
}
