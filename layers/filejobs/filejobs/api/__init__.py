"""The status API's HTTP side: requests parsed into the services' commands (parsing.py), results
and refusals rendered as JSON answers (rendering.py), and each route's OpenAPI description
(openapi.py). The routes themselves are functions/api/app.py."""
