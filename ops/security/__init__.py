"""Who may talk to a broker: the broker identity and the client users (``docs/security.md``)."""
