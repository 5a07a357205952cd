"""I/O: the one place that makes boto3 clients (`clients`), and the AWS lookups the plan, both backends and
`doctor` share: `network` (VPCs, subnets and what they reach), `zones` (AZ names and ids, placement scores),
`market` (live quotes: Spot prices and scores, On-Demand prices, quotas). Nothing here is imported by
`trainctl --help`: boto3 is loaded only when a command needs AWS."""
