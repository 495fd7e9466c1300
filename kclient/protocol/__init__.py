"""The pure protocol layer: bytes in, values out. No sockets, no files, no
trio, no clock reads.

- `.primitives`: integers, varints, strings, bytes, compact forms
- `.schema`: declarative field lists compiled per version
- `.messages`: one module per Kafka API and version negotiation
- `.records`: record batch v2, batch scanning, compression codecs
- `.connection`: sans-I/O framing for clients and servers
"""
