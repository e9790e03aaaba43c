"""What the OpenCL and Vulkan targets share, below both: the GPU algorithm once, each API's differences as data.

- api.py: one record per API (OpenCL C or GLSL spelling, images or texel buffers, NDRange or dispatch, local or
  workgroup size, the sweep's option keys): what differs between them, as values.
- profiles.py: the per-vendor tuning tables (each API's defaults per device profile, sweep spaces, the FMA
  probe's candidate shapes).
- tiles.py: a conv's output cut over work-items and groups: the launch grid, idle work-items, guarded stores.
- stores.py: whether a tensor's 4-channel groups are stored as vectors, and what fills a partial group.
- dispatch.py: the device tensors (GpuTensor: both runtimes' record) and a kernel's launch (GpuDispatch).
- vectors.py: the proof that a layout keeps a vector's lanes together (a vload4 / vec4 read is the same elements).
- pool.py: a pooling op's work (one work-item per output element) in API-neutral terms.
- sweep.py: `bench --sweep`'s tile x work-group permutations.
- probes.py: the FMA-peak and bandwidth-triad kernels, one description rendered in either API's language.
- program.py: a compiled job on one device, and the Target methods both GPU targets implement alike.

Records here describe a kernel's buffers, work sizes and dispatch without naming an API call: what the GPU network
runners build on.
"""
