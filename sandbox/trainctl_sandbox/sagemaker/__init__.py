"""SageMaker training jobs with a real lifecycle: validation, the container contract, the runner that
starts each host's processes, their output, and the S3 and CloudWatch data they read and write."""
