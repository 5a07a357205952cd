"""A user's script that reads its channel and writes its model (docs/your-script.md): counts the files under
$SM_CHANNEL_TRAIN, logs the count, writes the model file to $SM_MODEL_DIR and a TensorBoard event file."""
import os
import sys

channel = os.environ["SM_CHANNEL_TRAIN"]
files = sorted(os.path.relpath(os.path.join(top, n), channel) for top, _, names in os.walk(channel) for n in names)
total = sum(int(open(os.path.join(channel, f)).read()) for f in files)
print(f"trainctl read_files={len(files)} sum={total}", flush=True)
print("trainctl step=1 loss=0.5 samples_per_s=10.0 total_steps=1", flush=True)
model_dir = os.environ["SM_MODEL_DIR"]
os.makedirs(model_dir, exist_ok=True)
with open(os.path.join(model_dir, "model.txt"), "w") as f:
    f.write(f"files={len(files)}\n")
events = os.path.join(os.path.dirname(model_dir), "output", "tensorboard")
os.makedirs(events, exist_ok=True)
with open(os.path.join(events, "events.out.tfevents.1"), "w") as f:
    f.write("scalars\n")
sys.exit(0)
