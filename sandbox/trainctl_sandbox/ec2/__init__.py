"""EC2 as AWS runs it where moto does not: launches (RunInstances, instant CreateFleet), placement groups,
ClientToken, the Spot service-linked role, interruptions, and what an instance's network reaches."""
