"""Pure: every name, tag and S3 key trainctl gives a job's resources, kept within AWS's limits.

`tags` (the `trainctl:*` tag keys every resource carries), `resources` (role, profile, template, group and
training-job names within their limits; log groups; ARNs in a region's partition), `bucket` (the job bucket and
where each of a job's objects lives). No I/O: the backends, IAM documents and the node agent's contract share
these, so one place says them.
"""
