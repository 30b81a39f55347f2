"""The surveillance room's web console (docs/console.md): the live alerts, each alert's round as
the incident report shows it, the floor, and the handling of each alert by named users.

Below the command line, above the services: it reads the topics like a service and renders with
``surveil.analysis`` (the incident page's templates).
"""
