"""The bundled reference broker: a trio server speaking the Kafka protocol
over `kclient.storage` logs (standalone, no ZooKeeper yet).

- `Broker` (``server.py``): ``await nursery.start(Broker(config).serve)``
  returns the bound port; cancel to stop (logs are flushed and closed).
- `SUPPORTED_VERSIONS` (``handlers.py``): the API version ranges
  advertised in ApiVersions.
- ``state.py``: what the components share (identity, logs, topic
  overrides); ``components.py``: the replica manager, topic admin, group
  coordinator and controller, each built with the collaborators it uses;
  ``handlers.py``: the request handlers over them (Kafka's ``KafkaApis``).
- ``fetch.py``: Fetch with its long poll; ``zerocopy.py``: responses sent
  with ``os.sendfile`` from the segment files; ``convert.py``: message
  format conversion; ``meta.py``: ``meta.properties`` and producer ids.

Run it from the shell with ``kclient broker [server.properties]
[--override key=value ...]``, or from tests with
`kclient.testing.BrokerProcess`.
"""

from kclient.broker.handlers import SUPPORTED_VERSIONS
from kclient.broker.server import Broker

__all__ = ["Broker", "SUPPORTED_VERSIONS"]
