//! Files: safetensors checkpoints, optimizer state, the IDX (MNIST) format.
