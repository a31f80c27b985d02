"""The engine: the Topology Manager's merge and its vocabulary (bitmasks, hints, policies and
their options, scopes), the exact kubelet result without the cartesian product, and the
literal product fold it is proved against. No I/O, no adapter."""
