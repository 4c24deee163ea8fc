"""Data access: PynamoDB models and the repositories that turn transitions into conditional writes."""
