"""Application services: the use cases, composed from the domain and the data access."""
