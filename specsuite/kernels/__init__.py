"""SGLang's own sampling kernels, loaded from a release, the node's install or a file, and called
on CPU (Triton's interpreter) or a GPU: the kernel suite's subject.  The loading itself is
kernel_loading's, shared with the reference server's optional sampler."""
