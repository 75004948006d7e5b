# expect-cause: shared-forward
import torch
from torch import nn

torch.manual_seed(0)
obs_dim, act_dim, batch_size = 8, 2, 64


class Actor(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(obs_dim, 64), nn.Tanh(), nn.Linear(64, act_dim), nn.Tanh())

    def forward(self, obs):
        return self.net(obs)


class QValue(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(obs_dim + act_dim, 64), nn.Tanh(), nn.Linear(64, 1))

    def forward(self, obs, action):
        return self.net(torch.cat([obs, action], -1))


class TD3Loss(nn.Module):
    def __init__(self, actor, qvalue, gamma=0.99, policy_noise=0.2, noise_clip=0.5):
        super().__init__()
        self.actor, self.qvalue = actor, qvalue
        self.target_actor = Actor().requires_grad_(False)
        self.target_qvalue = QValue().requires_grad_(False)
        self.target_actor.load_state_dict(actor.state_dict())
        self.target_qvalue.load_state_dict(qvalue.state_dict())
        self.gamma, self.policy_noise, self.noise_clip = gamma, policy_noise, noise_clip

    def forward(self, td):
        obs, action = td["observation"], td["action"]
        actor_action = self.actor(obs)
        # evaluate the critic once on [actor actions; replay actions]
        stacked_obs = torch.cat([obs, obs], 0)
        stacked_act = torch.cat([actor_action, action], 0)
        q_all = self.qvalue(stacked_obs, stacked_act).squeeze(-1)  # expect: forward
        q_actor, q_pred = q_all.split(obs.shape[0])
        with torch.no_grad():
            noise = (torch.randn_like(action) * self.policy_noise).clamp(-self.noise_clip, self.noise_clip)
            next_action = (self.target_actor(td["next_observation"]) + noise).clamp(-1, 1)
            next_q = self.target_qvalue(td["next_observation"], next_action).squeeze(-1)
            target = td["reward"] + self.gamma * (1 - td["done"]) * next_q
        return {"loss_actor": -q_actor.mean(), "loss_qvalue": (q_pred - target).pow(2).mean()}


actor, qvalue = Actor(), QValue()
loss_fn = TD3Loss(actor, qvalue)
actor_optim = torch.optim.Adam(actor.parameters(), lr=3e-4)
critic_optim = torch.optim.Adam(qvalue.parameters(), lr=3e-4)

for i in range(5):
    batch = {
        "observation": torch.randn(batch_size, obs_dim),
        "action": torch.rand(batch_size, act_dim) * 2 - 1,
        "reward": torch.randn(batch_size),
        "next_observation": torch.randn(batch_size, obs_dim),
        "done": torch.zeros(batch_size),
    }
    loss = loss_fn(batch)
    actor_optim.zero_grad()
    loss["loss_actor"].backward()  # expect: frees
    actor_optim.step()
    critic_optim.zero_grad()
    loss["loss_qvalue"].backward()  # expect: raises
    critic_optim.step()
    print(i, loss["loss_actor"].item(), loss["loss_qvalue"].item())
