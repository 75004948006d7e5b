# expect-cause: carried-state
import torch
from torch import nn

N_EDGES = 6  # undirected graph on 4 nodes, built edge by edge; action N_EDGES = stop
TRIANGLES = torch.tensor([[0, 1, 3], [0, 2, 4], [1, 2, 5], [3, 4, 5]])


class Trajectories:
    def __init__(self, states, actions, log_probs, log_rewards):
        self.states, self.actions, self.log_probs, self.log_rewards = states, actions, log_probs, log_rewards

    def __len__(self):
        return self.actions.shape[1]
    def extend(self, other):
        if len(self) == 0:
            self.states, self.actions, self.log_probs, self.log_rewards = other.states, other.actions, other.log_probs, other.log_rewards
            return
        self.states = torch.cat([self.states, other.states], 1)
        self.actions = torch.cat([self.actions, other.actions], 1)
        self.log_probs = torch.cat([self.log_probs, other.log_probs], 1)
        self.log_rewards = torch.cat([self.log_rewards, other.log_rewards], 0)

    def __getitem__(self, idx):
        return Trajectories(self.states[:, idx], self.actions[:, idx], self.log_probs[:, idx], self.log_rewards[idx])

    def sample(self, n_trajectories):
        return self[torch.randperm(len(self))[:n_trajectories]]


def log_reward(x):
    return (x[:, TRIANGLES].prod(-1).sum(-1) + 0.1).log()


class TrajectoriesSampler:
    def __init__(self, pf):
        self.pf = pf

    def sample(self, n_trajectories):
        x = torch.zeros(n_trajectories, N_EDGES)
        states, actions, log_probs = [x], [], []
        for t in range(N_EDGES + 1):
            mask = torch.cat([x == 0, torch.ones(n_trajectories, 1, dtype=torch.bool)], 1)
            logits = self.pf(x).masked_fill(~mask, -1e9)
            a = torch.distributions.Categorical(logits=logits).sample()
            log_probs.append(logits.log_softmax(-1).gather(-1, a[:, None]).squeeze(-1))  # expect: forward
            x = x + nn.functional.one_hot(a, N_EDGES + 1)[:, :N_EDGES].float()
            states.append(x)
            actions.append(a)
        return Trajectories(torch.stack(states), torch.stack(actions), torch.stack(log_probs), log_reward(x))


class TrajectoryBalance(nn.Module):
    def __init__(self, pf):
        super().__init__()
        self.pf, self.logZ, self.on_policy = pf, nn.Parameter(torch.tensor(0.0)), False

    def get_pfs(self, traj):
        logits = self.pf(traj.states[:-1])
        logits = logits.masked_fill(~torch.cat([traj.states[:-1] == 0, torch.ones_like(logits[..., :1], dtype=torch.bool)], -1), -1e9)
        return logits.log_softmax(-1).gather(-1, traj.actions[..., None]).squeeze(-1)

    def forward(self, trajectories):
        log_pf = trajectories.log_probs if self.on_policy else self.get_pfs(trajectories)
        n_edges = trajectories.states[1:].sum(-1).clamp_min(1)
        log_pb = torch.where(trajectories.actions < N_EDGES, -n_edges.log(), torch.zeros_like(n_edges))
        scores = log_pf.sum(0) - log_pb.sum(0) - trajectories.log_rewards
        return (scores + self.logZ).pow(2).mean()


torch.manual_seed(0)
pf = nn.Sequential(nn.Linear(N_EDGES, 64), nn.ReLU(), nn.Linear(64, N_EDGES + 1))
loss_fn = TrajectoryBalance(pf)
optimizer = torch.optim.Adam([{"params": pf.parameters(), "lr": 1e-3}, {"params": [loss_fn.logZ], "lr": 1e-1}])
trajectories_sampler, on_policy = TrajectoriesSampler(pf), True
replay_buffer = Trajectories(None, torch.zeros(0, 0), None, None)
loss_fn.on_policy = on_policy
for i in range(5):
    trajectories = trajectories_sampler.sample(n_trajectories=16)
    training_samples = trajectories
    if replay_buffer is not None:
        replay_buffer.extend(training_samples)
        training_objects = replay_buffer.sample(n_trajectories=16)
    else:
        training_objects = training_samples
    optimizer.zero_grad()
    loss = loss_fn(training_objects)
    loss.backward()  # expect: raises frees
    optimizer.step()
    print(i, loss.item(), loss_fn.logZ.item())
