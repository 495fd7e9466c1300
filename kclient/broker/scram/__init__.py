"""SCRAM credential administration on the bundled broker (KIP-554):
`kclient.broker.scram.store` reads and writes the credentials where Kafka's
ZooKeeper mode keeps them, `kclient.broker.scram.apis` answers
DescribeUserScramCredentials and AlterUserScramCredentials,
`kclient.broker.scram.guards` holds their authorization checks."""
