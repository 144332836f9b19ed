"""HTTP transport: how the front door's server runs and what one connection may hold, apart
from the endpoints (app/mmprep/api): uvicorn's configuration and the process fleet
(server.py), the connection rules on its httptools protocol (connections.py), request
bodies read off the event loop (json_body.py) and bounded (body_limit.py), and answers
written in pieces (pieces_response.py). Knows uvicorn and Starlette, nothing of the routes."""
