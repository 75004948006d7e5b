# expect-cause: carried-state
from dataclasses import dataclass
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Normal, kl_divergence

torch.manual_seed(0)
OBS, ACT, EMBED, DETER, STOCH = 16, 3, 32, 32, 8


@dataclass
class RSSMState:
    deter: torch.Tensor
    stoch: torch.Tensor


class RSSM(nn.Module):
    def __init__(self):
        super().__init__()
        self.img_in = nn.Linear(STOCH + ACT, DETER)
        self.cell = nn.GRUCell(DETER, DETER)
        self.prior_net = nn.Linear(DETER, 2 * STOCH)
        self.post_net = nn.Linear(DETER + EMBED, 2 * STOCH)

    def _dist(self, stats):
        return Normal(stats.chunk(2, -1)[0], F.softplus(stats.chunk(2, -1)[1]) + 0.1)

    def obs_step(self, prev, action, embed):
        deter = self.cell(F.elu(self.img_in(torch.cat([prev.stoch, action], -1))), prev.deter)
        prior = self._dist(self.prior_net(deter))
        post = self._dist(self.post_net(torch.cat([deter, embed], -1)))
        return RSSMState(deter, post.rsample()), prior, post  # expect: forward

    def observe(self, embed, action, state=None):
        if state is None:
            state = RSSMState(torch.zeros(embed.shape[0], DETER), torch.zeros(embed.shape[0], STOCH))
        feats, kls = [], []
        for t in range(embed.shape[1]):
            state, prior, post = self.obs_step(state, action[:, t], embed[:, t])
            feats.append(torch.cat([state.deter, state.stoch], -1))
            kls.append(kl_divergence(post, prior).sum(-1))
        return state, torch.stack(feats, 1), torch.stack(kls, 1)


class WorldModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder, self.rssm = nn.Sequential(nn.Linear(OBS, EMBED), nn.ELU()), RSSM()
        self.decoder, self.reward_head = nn.Linear(DETER + STOCH, OBS), nn.Linear(DETER + STOCH, 1)
        self.opt = torch.optim.Adam(self.parameters(), lr=6e-4)

    def train_step(self, data, state=None):
        embed = self.encoder(data["obs"])
        post_state, feat, kl = self.rssm.observe(embed, data["action"], state)
        recon_loss = F.mse_loss(self.decoder(feat), data["obs"])
        reward_loss = F.mse_loss(self.reward_head(feat).squeeze(-1), data["reward"])
        model_loss = recon_loss + reward_loss + torch.clamp(kl.mean(), min=1.0)
        self.opt.zero_grad()
        model_loss.backward()  # expect: raises frees
        self.opt.step()
        return post_state, {"model_loss": model_loss.item(), "kl": kl.mean().item()}


class Agent:
    def __init__(self):
        self.wm = WorldModel()
        self.state = None

    def train(self, data):
        self.state, metrics = self.wm.train_step(data, self.state)
        return metrics


episodes = {"obs": torch.randn(20, 50, OBS), "action": torch.randn(20, 50, ACT), "reward": torch.randn(20, 50)}


def sample_batch(batch=8, length=10):
    ep = torch.randint(0, 20, (batch,))
    start = torch.randint(0, 50 - length, (batch,))
    idx = start[:, None] + torch.arange(length)[None]
    return {k: v[ep[:, None], idx] for k, v in episodes.items()}


agent = Agent()
for step in range(6):
    metrics = agent.train(sample_batch())
    print(step, {k: round(v, 3) for k, v in metrics.items()})
