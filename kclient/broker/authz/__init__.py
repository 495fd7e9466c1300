"""Authorization on the bundled broker: ACLs with Kafka's semantics
(KIP-11, KIP-290), stored where Kafka's ZooKeeper mode stores them.

- `kclient.broker.authz.principal`: who asks (``User:<name>``, the TLS
  principal mapping rules of KIP-371);
- `kclient.broker.authz.authorizer`: the decisions (``AclAuthorizer``);
- `kclient.broker.authz.zk_store` and `kclient.broker.authz.service`:
  the ACLs in ZooKeeper and every broker's cache of them;
- `kclient.broker.authz.check`, `kclient.broker.authz.guards_data`,
  `kclient.broker.authz.guards_admin`: what each API checks;
- `kclient.broker.authz.acl_apis`: CreateAcls / DescribeAcls / DeleteAcls;
- `kclient.broker.authz.authorization`: all of it for one broker.
"""
