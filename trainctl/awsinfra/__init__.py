"""The AWS plumbing both backends and `doctor` share, one module each, so that they cannot drift:
naming (every name trainctl builds, within AWS's limits, and partition-aware ARNs), network (default VPC,
subnet choice, a subnet's route to S3), zones (AZ names and ids, Spot placement scores) and bucket (the job
bucket and its S3 layout)."""
