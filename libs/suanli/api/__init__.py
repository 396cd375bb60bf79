"""gRPC contracts as Python: stubs generated from schemas/proto, committed with a header saying how.

`make proto` (``python -m suanli.api.build``) regenerates them; a unit test regenerates them into a
temporary folder and fails when the committed stubs differ from what the protos give. The proto
package `suanli.<service>.v1` becomes the Python package `suanli.api.<service>.v1`, which keeps the
generated modules apart from the hand-written service packages of the same name.
"""
