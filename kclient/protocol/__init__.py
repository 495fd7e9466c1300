"""The pure protocol layer: bytes in, values out. No sockets, no files, no
trio, no clock reads.

- :mod:`.primitives`: integers, varints, strings, bytes, compact forms
- :mod:`.schema`: declarative field lists compiled per version
- :mod:`.messages`: one module per Kafka API and version negotiation
- :mod:`.records`: record batch v2, batch scanning, compression codecs
- :mod:`.connection`: sans-I/O framing for clients and servers
"""
