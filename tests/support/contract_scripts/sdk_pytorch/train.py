"""A training script written for the SageMaker Python SDK's PyTorch estimator in script mode, as its documentation
shows one (`sagemaker.pytorch.PyTorch(entry_point="train.py", hyperparameters={...})`): hyperparameters arrive
as command-line arguments, the folders and hosts come from the SageMaker environment (SM_MODEL_DIR,
SM_CHANNEL_TRAINING, SM_HOSTS, SM_CURRENT_HOST, SM_NUM_GPUS), checkpoints go to /opt/ml/checkpoints and the
model, saved by the first host, to the model folder. Nothing in it knows trainctl; it handles no signal, so a
Spot notice's SIGTERM simply ends it and the next start resumes from its last epoch's checkpoint.

It fits y = 2x + 1 with one torch.nn.Linear on the channel's CSV rows; --epoch-seconds stands in for the time
a real epoch takes.
"""
import argparse
import json
import logging
import os
import sys
import time

import torch

logger = logging.getLogger(__name__)
logging.basicConfig(level=logging.INFO, stream=sys.stdout)
CHECKPOINT = "/opt/ml/checkpoints/checkpoint.pth"


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--learning-rate", type=float, default=0.1)
    parser.add_argument("--epoch-seconds", type=float, default=0.0)
    # The SageMaker environment, as the SDK's script-mode examples read it.
    parser.add_argument("--hosts", type=list, default=json.loads(os.environ["SM_HOSTS"]))
    parser.add_argument("--current-host", type=str, default=os.environ["SM_CURRENT_HOST"])
    parser.add_argument("--model-dir", type=str, default=os.environ["SM_MODEL_DIR"])
    parser.add_argument("--data-dir", type=str, default=os.environ["SM_CHANNEL_TRAINING"])
    parser.add_argument("--num-gpus", type=int, default=os.environ["SM_NUM_GPUS"])
    return parser.parse_args()


def load_data(data_dir):
    rows = []
    for name in sorted(os.listdir(data_dir)):
        with open(os.path.join(data_dir, name)) as f:
            rows += [[float(v) for v in line.split(",")] for line in f if line.strip()]
    data = torch.tensor(rows)
    return data[:, :1], data[:, 1:]


def save_checkpoint(state):
    os.makedirs(os.path.dirname(CHECKPOINT), exist_ok=True)
    torch.save(state, CHECKPOINT + ".tmp")
    os.replace(CHECKPOINT + ".tmp", CHECKPOINT)


def train(args):
    torch.manual_seed(0)
    device = torch.device("cuda" if args.num_gpus > 0 and torch.cuda.is_available() else "cpu")
    model = torch.nn.Linear(1, 1).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.learning_rate)
    start = 0
    if os.path.exists(CHECKPOINT):
        state = torch.load(CHECKPOINT)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = state["epoch"]
        logger.info("resuming from the checkpoint of epoch %d", start)
    x, y = load_data(args.data_dir)
    leader = args.current_host == args.hosts[0]
    for epoch in range(start + 1, args.epochs + 1):
        began = time.time()
        for i in range(0, len(x), args.batch_size):
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x[i:i + args.batch_size]), y[i:i + args.batch_size])
            loss.backward()
            optimizer.step()
        time.sleep(args.epoch_seconds)
        print(f"trainctl step={epoch} loss={loss.item():.6f} samples_per_s={len(x) / (time.time() - began):.1f} "
              f"total_steps={args.epochs}", flush=True)
        if leader:
            save_checkpoint({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch})
    if leader:
        os.makedirs(args.model_dir, exist_ok=True)
        with open(os.path.join(args.model_dir, "model.pth"), "wb") as f:
            torch.save(model.cpu().state_dict(), f)
        logger.info("saved the model after epoch %d", args.epochs)


if __name__ == "__main__":
    train(parse_args())
