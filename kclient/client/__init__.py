"""The client SDK: producer, partitioners, encoders, handlers, simple consumer,
consumer connector and the metadata cache (trio inside, with blocking
facades). Import the public names from `kclient` itself."""
