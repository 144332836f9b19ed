"""mmprep as a Ray Serve application (`mmprep serve --runtime ray`, or Ray's `serve run`):
the front door, decode replicas and engine replicas as three deployments, the tensors
handed from decoding to the engine through Ray's object store. Needs the ray extra
(`pip install -e '.[ray]'`)."""
