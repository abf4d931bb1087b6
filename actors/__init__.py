"""The Kafka roles as actors: broker, partition, replica fetcher, controller, producer, consumer.

Pure state machines live beside the actors that drive them. Nothing here awaits or does I/O: time
enters as ``now_ms`` and effects leave through the runtime's Context.
"""
