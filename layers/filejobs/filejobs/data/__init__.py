"""Data access: PynamoDB models, and repositories making each transition one conditional write."""
