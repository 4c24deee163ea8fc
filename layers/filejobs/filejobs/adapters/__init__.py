"""Adapters to AWS services other than DynamoDB (S3, SQS)."""
