"""Read a moto table's stream the way Lambda's DynamoDB event source does."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import boto3
from botocore.config import Config
from mypy_boto3_dynamodb import DynamoDBClient
from mypy_boto3_dynamodbstreams import DynamoDBStreamsClient


def streams_client() -> DynamoDBStreamsClient:
    # Given a stream ARN, botocore aims at the account's own endpoint ({account}.ddb...), which
    # moto does not answer: the regional endpoint serves the same API.
    return boto3.client("dynamodbstreams", config=Config(account_id_endpoint_mode="disabled"))


@dataclass
class StreamTap:
    """Reads a moto table's stream from the start, as Lambda's event source mapping would."""

    client: DynamoDBStreamsClient
    table: str
    stream_arn: str
    iterators: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of_table(cls, dynamodb: DynamoDBClient, table: str) -> StreamTap:
        arn = dynamodb.describe_table(TableName=table)["Table"]["LatestStreamArn"]
        return cls(streams_client(), table, arn)

    def read(self) -> list[dict[str, Any]]:
        """The records written since the last read, with the source ARN Lambda adds."""
        shards = self.client.describe_stream(StreamArn=self.stream_arn)["StreamDescription"]
        records: list[dict[str, Any]] = []
        for shard in shards["Shards"]:
            shard_id = shard["ShardId"]
            if shard_id not in self.iterators:
                self.iterators[shard_id] = self.client.get_shard_iterator(
                    StreamArn=self.stream_arn,
                    ShardId=shard_id,
                    ShardIteratorType="TRIM_HORIZON",
                )["ShardIterator"]
            got = self.client.get_records(ShardIterator=self.iterators[shard_id])
            self.iterators[shard_id] = got["NextShardIterator"]
            for record in got["Records"]:
                raw = json.loads(json.dumps(record, default=str))
                records.append({**raw, "eventSourceARN": self.stream_arn})
        return records
