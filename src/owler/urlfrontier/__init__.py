"""``owler frontier serve``: the project's frontiers as a URLFrontier service
(:mod:`owler.urlfrontier.service`).

The rest of URLFrontier lives with the frontiers: the API's messages and stub
(:mod:`owler.frontier.urlfrontier_api`, from the descriptor ``make setup`` rebuilds out of the
``urlfrontier-API`` artifact: ``services/urlfrontier/``) and the client backend
``frontier.backend: urlfrontier`` (:mod:`owler.frontier.urlfrontier`).
"""
