"""`python -m ops` is the `actorlog` command."""

from ops.cli.main import main

raise SystemExit(main())
