"""hetero as a TorchDynamo backend: ``torch.compile(model, backend="hetero", options={"device":
"opencl:0"})``, or :func:`hetero.torch.compile`, runs a PyTorch model's graphs on a hetero device.

TorchDynamo captures the model's graphs; AOTAutograd traces them into forward and backward
graphs of core ATen operations (torch's ``core_aten_decompositions``), and hetero runs each graph
node by node on hetero arrays (:mod:`.interpreter`): an ATen operation with a lowering
(:mod:`.lowerings`: elementwise arithmetic, comparisons, reductions, views and reshapes, matmul
through the device's BLAS routine choice, softmax, layer norm, convolution as im2col products)
runs as hetero's operations, fused where they chain; any other runs in torch on the host, its
tensors copied there and back, and is counted (:func:`hetero.torch.explain` lists them; nothing
runs on the host silently). Graphs whose every operation lowers run under :func:`hetero.jit`, so
later calls replay one launch plan.

Rooms: :mod:`.transfer` (tensors in and out, parameters uploaded once per version),
:mod:`.lowerings` (ATen operation -> hetero function), :mod:`.interpreter` (one graph on one
device), :mod:`.dynamo` (the backend torch calls, and its registration), :mod:`.report` (what
ran where).

May import: every floor below; torch (imported by these modules only).
"""
