"""PyTorch reference timings for the Conv2d and LSTM sections of examples/bench.rs.

Same shapes as forge's sections: Conv2d batch 64, 3->64, 3x3, padding 1,
32x32, float32; LSTM 1 layer, batch 64, seq 32, 128 -> 128, batch_first.
Median ms over 30 timed runs after 5 warm-up runs, for 1 and 2 threads.
Run: pip install torch && python examples/torch/conv_lstm_bench.py
"""
import statistics
import time

import torch


def median_ms(fn, reps=30, warmup=5):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main():
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 64, 3, padding=1)
    x = torch.randn(64, 3, 32, 32)
    xg = x.clone().requires_grad_(True)
    lstm = torch.nn.LSTM(128, 128, batch_first=True)
    s = torch.randn(64, 32, 128)
    sg = s.clone().requires_grad_(True)

    def conv_fwd():
        with torch.no_grad():
            conv(x)

    def conv_fwd_bwd_w():
        conv.zero_grad()
        conv(x).sum().backward()

    def conv_fwd_bwd_x():
        conv.zero_grad()
        xg.grad = None
        conv(xg).sum().backward()

    def lstm_fwd():
        with torch.no_grad():
            lstm(s)

    def lstm_fwd_bwd():
        lstm.zero_grad()
        sg.grad = None
        out, _ = lstm(sg)
        out.sum().backward()

    print(f"torch {torch.__version__}")
    for threads in (1, 2):
        torch.set_num_threads(threads)
        print(f"threads {threads}: "
              f"conv2d fwd {median_ms(conv_fwd):.2f} ms, "
              f"fwd+bwd (w,b) {median_ms(conv_fwd_bwd_w):.2f} ms, "
              f"fwd+bwd (x,w,b) {median_ms(conv_fwd_bwd_x):.2f} ms; "
              f"lstm fwd {median_ms(lstm_fwd):.2f} ms, "
              f"fwd+bwd {median_ms(lstm_fwd_bwd):.2f} ms")


if __name__ == "__main__":
    main()
