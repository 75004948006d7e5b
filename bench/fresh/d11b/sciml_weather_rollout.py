# expect-cause: carried-state
import torch
import torch.nn as nn

torch.manual_seed(0)
N_VARS, HISTORY_LEN, LAT, LON = 4, 2, 8, 16

conf = {
    "data": {"history_len": HISTORY_LEN, "forecast_len": 3},
    "trainer": {"backprop_on_timestep": [1, 3, 4], "grad_max_norm": 1.0, "batches_per_epoch": 3},
}


class ERA5MultiStepDataset:
    """Yields one dict per forecast step, like CREDIT's multi-step ERA5 loaders."""

    def __init__(self, conf, batch_size=2):
        self.forecast_len, self.batch_size = conf["data"]["forecast_len"], batch_size
        self.state = torch.randn(batch_size, N_VARS, HISTORY_LEN + self.forecast_len + 1, LAT, LON)

    def __iter__(self):
        for forecast_step in range(1, self.forecast_len + 2):
            t = HISTORY_LEN + forecast_step - 1
            yield {
                "forecast_step": forecast_step,
                "x": self.state[:, :, :HISTORY_LEN],
                "y": self.state[:, :, t:t + 1] + 0.01 * torch.randn(self.batch_size, N_VARS, 1, LAT, LON),
                "stop_forecast": forecast_step == self.forecast_len + 1,
            }


class CrossFormerLite(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(N_VARS * HISTORY_LEN, 32, 3, padding=1), nn.GELU(), nn.Conv2d(32, N_VARS, 3, padding=1)
        )

    def forward(self, x):
        b = x.shape[0]
        out = self.net(x.reshape(b, N_VARS * HISTORY_LEN, LAT, LON))  # expect: forward
        return x[:, :, -1:] + out.reshape(b, N_VARS, 1, LAT, LON)


def latitude_weighted_mse(y, y_pred):
    w = torch.cos(torch.linspace(-1.4, 1.4, LAT)).view(1, 1, 1, LAT, 1)
    return (w / w.mean()) * (y - y_pred) ** 2


class Trainer:
    def __init__(self, model):
        self.model = model

    def train_one_epoch(self, epoch, conf, optimizer, criterion):
        self.model.train()
        backprop_on_timestep = conf["trainer"]["backprop_on_timestep"]
        results = []
        for steps in range(conf["trainer"]["batches_per_epoch"]):
            logs = []
            for batch in ERA5MultiStepDataset(conf):
                forecast_step = batch["forecast_step"]
                if forecast_step == 1:
                    x = batch["x"]
                y_pred = self.model(x)
                if forecast_step in backprop_on_timestep:
                    loss = criterion(batch["y"], y_pred).mean()
                    logs.append(loss.item())
                    loss.backward()  # expect: raises frees
                if batch["stop_forecast"]:
                    break
                # multi-step in: drop the oldest time slot, append the prediction
                x_detach = x[:, :, 1:, ...].detach()
                x = torch.cat([x_detach, y_pred], dim=2)
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm=conf["trainer"]["grad_max_norm"])
            optimizer.step()
            optimizer.zero_grad()
            results.append(sum(logs) / len(logs))
        print(f"Epoch: {epoch} train_loss: {sum(results) / len(results):.6f}")


model = CrossFormerLite()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
trainer = Trainer(model)
for epoch in range(2):
    trainer.train_one_epoch(epoch, conf, optimizer, latitude_weighted_mse)
