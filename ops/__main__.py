"""`python -m ops` is the `actorlog` command."""

from ops.cli import main

raise SystemExit(main())
