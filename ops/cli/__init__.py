"""The ``actorlog`` command: ``main.py`` dispatches to one module per subcommand, each with a
``main(argv) -> int``. Errors are one line on stderr and a non-zero exit.
"""
