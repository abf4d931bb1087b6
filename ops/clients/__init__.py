"""Client libraries: the asyncio Producer, Consumer and Admin, and the client node they share."""
