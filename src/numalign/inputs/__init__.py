"""Reading what users hand numalign, within bounds: YAML/JSON documents, Kubernetes quantities,
CPU lists and Go's number syntax, each with one-line errors naming the field."""
