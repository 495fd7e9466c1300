"""Configuration objects built from Kafka's dotted property names.

Four frozen attrs classes, `ProducerConfig`, `ConsumerConfig`,
`BrokerConfig` and `AdminConfig`, hold validated settings under snake_case attribute
names. Each attribute is declared with `prop`, one line per Kafka
property: the Kafka name, a converter, a default, an optional validator and
the older spellings (aliases) that mean the same thing. That declaration is
the whole table; nothing is hand-written per key.

Build a config in any of these ways:

- ``ProducerConfig(metadata_broker_list="h1:9092", producer_type="async")``,
  the attrs constructor with snake_case keyword arguments;
- ``ProducerConfig.from_properties({"metadata.broker.list": "h1:9092"})``,
  from a mapping of Kafka property names (values may be strings, as read
  from a file, or typed Python values);
- ``ProducerConfig.from_properties("producer.properties")`` or
  ``BrokerConfig.from_file("server.properties", ["port=9093"])``, from a Java
  ``.properties`` file (parsed with ``jproperties``) plus ``key=value``
  overrides, the way Kafka's start scripts take ``--override``.

Every value is converted and checked on construction: a value of the wrong
type, out of range or not one of the allowed choices raises
`ConfigError` naming the property and the value. A key
the config does not know raises `ConfigError` naming the closest known name
(``"'linger.msec' is not a known config for ProducerConfig; did you mean
'linger.ms'?"``), as confluent-kafka and kafka-python do;
``from_properties(..., strict=False)`` (and ``from_file`` /
``with_properties``) logs it as a warning and ignores it instead, as
Kafka 0.8 did. Modern names whose meaning differs from the
classic property they resemble (``fetch.max.bytes`` is not
``fetch.message.max.bytes``) are not aliased:
each class's ``NOT_MAPPED`` says why and what to set.

The configuration reference page, ``docs/configuration.md``, is rendered
from these declarations by `kclient.config.reference`
(``python -m kclient.config.reference > docs/configuration.md``); a test
fails when the committed page is out of date.

The package, one job a module:

- `kclient.config.base`: the declaration machinery (`prop`, `Property`,
  `REQUIRED`, the shared constructors, aliases, `ConfigError` naming);
- `kclient.config.convert`: converters and validators of property values;
- `kclient.config.files`: ``.properties`` files and ``--override`` lists;
- `kclient.config.formats`: message format versions and per-topic configs;
- `kclient.config.producer`, `kclient.config.consumer`,
  `kclient.config.broker`, `kclient.config.admin`: the four config classes;
- `kclient.config.reference`: the Markdown configuration reference.

Every public name imports from ``kclient.config`` itself.

Sources: Kafka's configuration reference
(https://kafka.apache.org/documentation/#producerconfigs,
https://kafka.apache.org/documentation/#consumerconfigs,
https://kafka.apache.org/documentation/#brokerconfigs) and, for the
classic names this SDK keeps, the Kafka 0.8 configuration page
(https://kafka.apache.org/08/documentation.html#configuration), with the
0.7 spellings of the producer's queue settings
(https://kafka.apache.org/07/documentation.html#configuration).
"""

from kclient.config.admin import AdminConfig
from kclient.config.base import REQUIRED, Property, prop
from kclient.config.broker import BrokerConfig
from kclient.config.consumer import ConsumerConfig
from kclient.config.convert import COMPRESSION_CODECS, HostPort, Listener
from kclient.config.files import load_properties, parse_overrides
from kclient.config.formats import (
    TIMESTAMP_TYPES,
    TOPIC_CONFIGS,
    load_topic_configs,
    message_format_magic,
    parse_kafka_version,
)
from kclient.config.producer import ProducerConfig

__all__ = [
    "AdminConfig",
    "BrokerConfig",
    "COMPRESSION_CODECS",
    "ConsumerConfig",
    "HostPort",
    "Listener",
    "ProducerConfig",
    "Property",
    "REQUIRED",
    "TIMESTAMP_TYPES",
    "TOPIC_CONFIGS",
    "load_properties",
    "load_topic_configs",
    "message_format_magic",
    "parse_kafka_version",
    "parse_overrides",
    "prop",
]
