"""filejobs: serverless file processing jobs on AWS (S3, SQS, DynamoDB, Lambda)."""

__version__ = "0.1.0"
