"""Infrastructure helpers shared by tests, tools and the local stack."""
