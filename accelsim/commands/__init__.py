"""Sub-commands of the ``accelsim`` CLI, one module each.

Every module here defines ``NAME`` (the sub-command), ``HELP`` (one line),
``add_arguments(parser)`` and ``run(args) -> int``. Heavy imports (pandas, simpy,
matplotlib) belong inside ``run`` so that ``accelsim --help`` stays instant.
"""
