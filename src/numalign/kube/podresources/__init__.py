"""The kubelet's pod-resources gRPC API (``podresources/v1``): the proto, its generated
messages (``api_pb2``, see ``regen.py``) and a client (:mod:`.client`, needs ``grpcio``)."""
