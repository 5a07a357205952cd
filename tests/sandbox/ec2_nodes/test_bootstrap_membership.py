"""An elastic EC2 job's membership (trainctl/bootstrap/membership.py), agreed by real node agents over the sandbox's S3
and EC2: the first generation waits for every node; the loss of any node, the first one (the master) included, is a
new generation of the survivors with a new master; a replacement is seen by the running nodes and named by the next
generation; fewer live nodes than min_nodes train nothing."""
from __future__ import annotations

import ipaddress

from tests.support.node_agent_helpers import FakeImds, make_agent, s3_keys
from trainctl.bootstrap import membership

JOB = "elastic-job"


def _launch(sb, count: int) -> list[tuple[str, str]]:
    from trainctl_sandbox.server.seed import ami_id

    done = sb.client("ec2").run_instances(
        ImageId=ami_id("us-east-1", "gpu-pytorch-2.7"), InstanceType="g5.xlarge", MinCount=count, MaxCount=count,
        MetadataOptions={"HttpTokens": "required"},
        TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": "trainctl:job", "Value": JOB}]}])
    return [(i["InstanceId"], i["PrivateIpAddress"]) for i in done["Instances"]]


def test_generations_follow_the_live_nodes_whichever_is_lost(sandbox_env, tmp_path):
    sb, imds, agents = sandbox_env, [], {}

    def node(instance_id: str, ip: str):
        imds.append(FakeImds(instance_id, ip))
        agents[ip] = make_agent(sb, tmp_path / instance_id / "opt", JOB, imds[-1], nnodes=4, elastic_min_nodes=3)
        return agents[ip]

    try:
        ids = dict((ip, i) for i, ip in _launch(sb, 4))
        for ip, instance_id in ids.items():
            node(instance_id, ip)
        first = [a.members.wait(lambda: False) for a in agents.values()]
        everyone = sorted(ids, key=ipaddress.ip_address)
        assert first == [everyone] * 4 and {a.members.generation for a in agents.values()} == {1}

        master = everyone[0]   # the first node, rank 0 and the rendezvous' master, is reclaimed
        sb.client("ec2").terminate_instances(InstanceIds=[ids[master]])
        survivors = [agents[ip] for ip in everyone[1:]]
        second = [a.members.wait(lambda: False) for a in survivors]
        assert second == [everyone[1:]] * 3 and {a.members.generation for a in survivors} == {2}
        ports = {membership.master_port(29500, g) for g in (1, 2)}
        assert len(ports) == 2   # a straggler of generation 1 cannot reach generation 2's store

        (newcomer_id, newcomer_ip), = _launch(sb, 1)   # the replacement
        newcomer = node(newcomer_id, newcomer_ip)
        assert membership.newcomers(survivors[0].peers(), second[0]) == [newcomer_ip]   # the running nodes see it
        third = newcomer.members.wait(lambda: False)
        assert sorted(third, key=ipaddress.ip_address) == third and set(third) == {*everyone[1:], newcomer_ip}
        assert [a.members.wait(lambda: False) for a in survivors] == [third] * 3 and newcomer.members.generation == 3

        sb.client("ec2").terminate_instances(InstanceIds=[ids[everyone[1]], ids[everyone[2]]])
        left = agents[everyone[3]]
        assert left.members.choose(left.peers()) is None   # 2 live nodes, min_nodes 3: wait for a replacement
        assert len(s3_keys(sb, f"{JOB}/membership/")) == 3
    finally:
        for agent in agents.values():
            agent.log.stopping.set()
        for server in imds:
            server.close()
