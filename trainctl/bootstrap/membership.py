"""Elastic membership of an EC2 job (`elastic: {min_nodes: N}`): which nodes train together now, agreed by the
nodes' agents through S3, so that the job keeps training on the survivors of a reclaim and takes a newcomer in.

A membership is a generation: s3://<bucket>/<job>/membership/gen-<10 digits>.json holding the sorted private IPs of
its nodes. Every agent proposes the next generation from what it sees (the job's live tagged instances: the same
source as the fixed-size wait, Agent.peers) with a conditional write (If-None-Match: *): the first proposal of a
generation number wins, the others read it. A node runs a generation that names it and whose nodes are all live;
rank 0 (the master, torchrun's static rendezvous) is its lowest IP, so the loss of any node, the first one
included, is only a new generation with a new master. Each generation gets its own master port (a straggler of the
previous one can never join the next one's store).

When the membership changes the running training is stopped the way a Spot notice stops it (SIGTERM: the bundled
scripts checkpoint, outcome.watch_job), and torchrun starts again on the new generation from the checkpoint
(restored from S3 by the agent, as after any interruption):
- a node is lost: the survivors start the next generation as soon as they are at least min_nodes;
- a newcomer (a replacement) is live but in no running generation: the running nodes see it at their next poll
  (outcome.py) and stop at that checkpoint; the newcomer has meanwhile proposed the generation that names it.
The job's first generation waits for all its nodes, as the fixed-size job does (the launch is all-or-nothing).
Why not torchrun's own elastic rendezvous (c10d, --nnodes MIN:MAX): docs/architecture.md.
Standard library plus boto3 only, as the agent.
"""
from __future__ import annotations

import json
import re
import time

from . import replacement

PREFIX = "membership"
GEN_RE = re.compile(r"^gen-(\d{10})\.json$")
PORT_SPAN = 100  # generation g uses master_port + g % PORT_SPAN


def min_nodes(cfg: dict) -> int | None:
    """The elastic bound of the job's config (None: a fixed-size job, today's wait for every node)."""
    value = cfg.get("elastic_min_nodes")
    return int(value) if value else None


def newcomers(live: list[str], ips: list[str]) -> list[str]:
    """Live nodes of the job that the running generation leaves out: they join at the next membership change."""
    return [ip for ip in live if ip not in ips]


def master_port(base: int, generation: int) -> int:
    return base + generation % PORT_SPAN


class Membership:
    def __init__(self, agent):
        self.agent = agent
        self.generation = 0  # the generation this node last ran (0: none yet)

    def _key(self, generation: int | None = None) -> str:
        name = "" if generation is None else f"gen-{generation:010d}.json"
        return self.agent.key(PREFIX, name) if name else self.agent.key(PREFIX) + "/"

    def latest(self) -> tuple[int, list[str]]:
        """The newest generation and its nodes; (0, []) before the first."""
        a = self.agent
        newest, kwargs = 0, {"Bucket": a.cfg["bucket"], "Prefix": self._key(), **a.owner}
        while True:
            page = a.s3.list_objects_v2(**kwargs)
            for obj in page.get("Contents", []):
                found = GEN_RE.match(obj["Key"].rsplit("/", 1)[-1])
                newest = max(newest, int(found.group(1))) if found else newest
            if not page.get("IsTruncated"):
                break
            kwargs["ContinuationToken"] = page["NextContinuationToken"]
        if not newest:
            return 0, []
        body = a.s3.get_object(Bucket=a.cfg["bucket"], Key=self._key(newest), **a.owner)["Body"].read()
        return newest, list(json.loads(body)["nodes"])

    def propose(self, generation: int, nodes: list[str]) -> bool:
        """Write generation `generation` unless another node already did: True when this proposal is it."""
        a = self.agent
        body = json.dumps({"nodes": nodes, "by": a.instance_id, "at": round(time.time(), 3)}).encode()
        try:
            a.s3.put_object(Bucket=a.cfg["bucket"], Key=self._key(generation), Body=body, IfNoneMatch="*", **a.owner)
            return True
        except Exception as e:  # noqa: BLE001
            if "PreconditionFailed" in str(e) or "412" in str(e):
                return False  # another node's proposal of this generation won: read it
            raise

    def choose(self, live: list[str]) -> list[str] | None:
        """One round: the generation this node runs now, or None (not yet: too few nodes, or not agreed)."""
        a, least, want = self.agent, min_nodes(self.agent.cfg) or 1, int(self.agent.cfg["nnodes"])
        generation, nodes = self.latest()
        if generation > self.generation and a.ip in nodes and set(nodes) <= set(live):
            return self._run(generation, nodes)
        first = generation == 0  # the job's first start waits for every node, as a fixed-size job does
        if a.ip not in live or len(live) < (want if first else least):
            return None
        if self.propose(generation + 1, live):
            return self._run(generation + 1, live)
        return None  # lost the race: the next round reads the winner's

    def _run(self, generation: int, nodes: list[str]) -> list[str]:
        self.generation = generation
        self.agent.log.add(f"trainctl-agent: membership generation {generation}: {len(nodes)} nodes "
                           f"({', '.join(nodes)})")
        return nodes

    def wait(self, ended) -> list[str]:
        """The next generation's nodes, sorted by IP (rank 0 first); [] when the job ended meanwhile (`ended()`: a
        limit, this node's notice; or a status), as Agent.wait_for_peers. `ended` is asked on every round."""
        a, said = self.agent, None
        deadline = time.time() + float(a.cfg.get("peer_wait_s", 3600))
        while time.time() < deadline:
            if ended():
                return []
            try:
                if a.marker():
                    return []
                live = a.peers()
                chosen = self.choose(live)
            except Exception as e:  # noqa: BLE001 - throttled or unreachable: look again next round
                a.log.add(f"trainctl-agent: could not agree on the job's nodes: {e}")
                live, chosen = [], None
            if chosen:
                return chosen
            if a.ip in live:
                replacement.tend(a, live)  # too few to train: the lowest live node asks for the missing ones
            if said != len(live):
                a.log.add(f"trainctl-agent: {len(live)} of {a.cfg['nnodes']} nodes up (elastic: at least "
                          f"{min_nodes(a.cfg)}); waiting")
                said = len(live)
            time.sleep(a.setting("peer_poll_s", 5.0))
        raise SystemExit(f"trainctl-agent: gave up waiting for {min_nodes(a.cfg)} nodes")
