"""The broker's ACLs: the authorizer's cache kept current from the store,
and the changes CreateAcls / DeleteAcls make (Kafka's ``AclAuthorizer``
with its ZooKeeper change listeners).

At start the cache is loaded from the store; in ZooKeeper mode both change
paths (``/kafka-acl-changes``, ``/kafka-acl-extended-changes``) are
watched first, and each notification newer than the ones present at start
rereads the resource it names, so a change made through any broker (or
written into ZooKeeper by Kafka's tools) is applied on every broker. A
broker that makes a change applies it to its own cache at once.
Notifications older than 15 minutes are deleted
(`kclient.broker.change_notifications`).
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Sequence

import trio

from kclient.acl import AccessControlEntry, AclBinding, AclBindingFilter, ResourcePattern
from kclient.broker.authz.authorizer import AclAuthorizer
from kclient.broker.authz.zk_store import (
    ACL_CHANGE_PREFIX,
    EXTENDED_CHANGES_PATH,
    LITERAL_CHANGES_PATH,
    AclStore,
    MemoryAclStore,
    ZkAclStore,
    decode_change,
)
from kclient.broker.change_notifications import CHANGE_EXPIRATION_MS, purge_obsolete_notifications
from kclient.zk.client import TrioZk, ZkClient

__all__ = ["AclService"]

log = logging.getLogger("kclient.broker.authorizer")


def _deliver(send: trio.MemorySendChannel[tuple[str, list[str]]], path: str, children: list[str]) -> None:
    send.send_nowait((path, children))


def _sequence(child: str) -> int | None:
    digits = child[len(ACL_CHANGE_PREFIX) :]
    return int(digits) if child.startswith(ACL_CHANGE_PREFIX) and digits.isdigit() else None


class AclService:
    """The authorizer and its store (see the module docstring).

    Args:
        authorizer: The authorizer whose cache this keeps.
        zk: The broker's ZooKeeper session (None: ACLs in memory only).
    """

    def __init__(self, authorizer: AclAuthorizer, zk: ZkClient | None = None, *, change_expiration_ms: int = CHANGE_EXPIRATION_MS) -> None:
        self.authorizer = authorizer
        self.zk = zk
        #: Notifications older than this (ms) are deleted when their path's
        #: notifications are handled (`kclient.broker.change_notifications`).
        self.change_expiration_ms = change_expiration_ms
        self.store: AclStore = ZkAclStore(zk) if zk is not None else MemoryAclStore()
        self._last_seen: dict[str, int | None] = {LITERAL_CHANGES_PATH: None, EXTENDED_CHANGES_PATH: None}
        self._lock = trio.Lock()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Load the cache and follow the change notifications until cancelled."""
        if self.zk is None:
            task_status.started()
            return
        tzk = TrioZk(self.zk)
        send, receive = trio.open_memory_channel[tuple[str, list[str]]](math.inf)
        for path in (LITERAL_CHANGES_PATH, EXTENDED_CHANGES_PATH):
            await tzk.watch_children(path, functools.partial(_deliver, send, path))
        # The first delivery of each watch marks the notifications already there.
        while any(seen is None for seen in self._last_seen.values()):
            path, children = await receive.receive()
            await self._changed(tzk, path, children)
        loaded = await trio.to_thread.run_sync(self.store.load_all)
        for pattern, entries in loaded.items():
            self.authorizer.replace(pattern, entries)
        log.info("loaded the ACLs of %d resource patterns from ZooKeeper", len(loaded))
        task_status.started()
        async for path, children in receive:
            await self._changed(tzk, path, children)

    async def _changed(self, tzk: TrioZk, changes_path: str, children: list[str]) -> None:
        seqs = sorted((s, c) for c in children if (s := _sequence(c)) is not None)
        last = self._last_seen[changes_path]
        if last is None:
            self._last_seen[changes_path] = seqs[-1][0] if seqs else -1
        else:
            await self._apply(tzk, changes_path, seqs, last)
        await trio.to_thread.run_sync(purge_obsolete_notifications, tzk.client, changes_path, [c for _, c in seqs], self.change_expiration_ms)

    async def _apply(self, tzk: TrioZk, changes_path: str, seqs: list[tuple[int, str]], last: int) -> None:
        for seq, child in seqs:
            if seq <= last:
                continue
            self._last_seen[changes_path] = last = seq
            try:
                data = await tzk.run(tzk.client.get, f"{changes_path}/{child}")
                pattern = decode_change(changes_path, data)
                entries = await trio.to_thread.run_sync(self.store.read, pattern)
            except Exception as exc:  # a bad notification must not stop the listener
                log.warning("cannot apply ACL change %s/%s: %s", changes_path, child, exc)
                continue
            log.debug("ACL change %s: %s now has %d ACLs", child, pattern, len(entries))
            self.authorizer.replace(pattern, entries)

    async def create(self, bindings: Sequence[AclBinding]) -> list[Exception | None]:
        """Add bindings (Kafka's ``Authorizer.createAcls``).

        Args:
            bindings: Valid, concrete bindings.

        Returns:
            Per binding, None or the exception that stopped it.
        """
        results: list[Exception | None] = [None] * len(bindings)
        by_pattern: dict[ResourcePattern, list[int]] = {}
        for i, binding in enumerate(bindings):
            by_pattern.setdefault(binding.pattern, []).append(i)
        async with self._lock:
            for pattern, indexes in by_pattern.items():
                added = frozenset(bindings[i].entry for i in indexes)
                try:
                    stored = await trio.to_thread.run_sync(self.store.update, pattern, lambda current, added=added: current | added)
                except Exception as exc:
                    log.warning("cannot add ACLs to %s: %s", pattern, exc)
                    for i in indexes:
                        results[i] = exc
                    continue
                self.authorizer.replace(pattern, stored)
                log.info("added ACLs to %s: %s", pattern, sorted(map(str, added)))
        return results

    async def delete(self, filters: Sequence[AclBindingFilter]) -> list[list[tuple[AclBinding, Exception | None]]]:
        """Remove the bindings matching each filter (Kafka's
        ``Authorizer.deleteAcls``).

        Args:
            filters: The filters.

        Returns:
            Per filter, the bindings it deleted, each with None or the
            exception that kept it.
        """
        out: list[list[tuple[AclBinding, Exception | None]]] = [[] for _ in filters]
        async with self._lock:
            patterns = {b.pattern for b in self.authorizer.acls()}
            for pattern in sorted(patterns, key=lambda p: (p.resource_type, p.pattern_type, p.name)):
                removed: dict[AccessControlEntry, list[int]] = {}

                def change(current: frozenset[AccessControlEntry], pattern: ResourcePattern = pattern, removed: dict[AccessControlEntry, list[int]] = removed) -> frozenset[AccessControlEntry]:
                    removed.clear()
                    for entry in current:
                        hits = [i for i, f in enumerate(filters) if f.matches(AclBinding(pattern, entry))]
                        if hits:
                            removed[entry] = hits
                    return current - frozenset(removed)

                error: Exception | None = None
                try:
                    stored = await trio.to_thread.run_sync(self.store.update, pattern, change)
                    self.authorizer.replace(pattern, stored)
                except Exception as exc:
                    log.warning("cannot delete ACLs of %s: %s", pattern, exc)
                    error = exc
                for entry, hits in removed.items():
                    for i in hits:
                        out[i].append((AclBinding(pattern, entry), error))
                if removed and error is None:
                    log.info("deleted ACLs of %s: %s", pattern, sorted(map(str, removed)))
        return out
