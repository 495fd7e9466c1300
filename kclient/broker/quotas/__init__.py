"""Client quotas of the bundled broker, as Kafka's ZooKeeper-mode brokers
enforce them: produce and fetch byte rates per user and client id (KIP-13,
KIP-55; `kclient.broker.quotas.manager`), the entities in ZooKeeper
(`kclient.broker.quotas.entities`), the windowed rate
(`kclient.broker.quotas.rate`), the connection creation rate (KIP-612;
`kclient.broker.quotas.connections`) and DescribeClientQuotas /
AlterClientQuotas (KIP-546; `kclient.broker.quotas.apis`).
"""
