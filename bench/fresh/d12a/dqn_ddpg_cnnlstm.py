# DQN + DDPG sharing a CNN+LSTM state encoder, optimised one after the other
# (discuss.pytorch.org "Can not create a new calculation graph after the backward propagation", t/45026)
# expect-cause: carried-state
import torch
import torch.nn as nn

torch.manual_seed(0)
SIZE_BATCH, GAMMA_DQN = 8, 0.9


class Model(nn.Module):
    def __init__(self, n_actions=4, hidden=24):
        super().__init__()
        self.cnn = nn.Sequential(nn.Conv1d(2, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool1d(4))
        self.lstm = nn.LSTM(32, hidden, batch_first=True)
        self.dqn_eval = nn.Linear(hidden + 3, n_actions)
        self.dqn_target = nn.Linear(hidden + 3, n_actions)
        self.actor = nn.Sequential(nn.Linear(hidden + 3, 1), nn.Tanh())
        self.critic = nn.Linear(hidden + 4, 1)
        self.hidden_optim = None

    def forward_cnnlstm(self, s_cnnlstm, flag_optim=False):
        feat = self.cnn(s_cnnlstm).flatten(1).unsqueeze(1)
        hidden = self.hidden_optim if flag_optim else None
        out, (h, c) = self.lstm(feat, hidden)  # expect: forward
        if flag_optim:
            self.hidden_optim = (h, c)
        return out.squeeze(1), h, c

    def forward_dqn_eval(self, s_dqn, s_cnnlstm_out):
        return self.dqn_eval(torch.cat([s_cnnlstm_out, s_dqn], 1))

    def forward_dqn_target(self, s_dqn, s_cnnlstm_out):
        return self.dqn_target(torch.cat([s_cnnlstm_out, s_dqn], 1))

    def forward_actor(self, s, s_cnnlstm_out):
        return self.actor(torch.cat([s_cnnlstm_out, s], 1))

    def forward_critic(self, s, a, s_cnnlstm_out):
        return self.critic(torch.cat([s_cnnlstm_out, s, a], 1))


model = Model()
optimizer_cnnlstm = torch.optim.Adam(list(model.cnn.parameters()) + list(model.lstm.parameters()), lr=1e-3)
optimizer_dqn = torch.optim.Adam(model.dqn_eval.parameters(), lr=1e-3)
optimizer_actor = torch.optim.Adam(model.actor.parameters(), lr=1e-3)
loss_dqn_fn = nn.MSELoss()

for episode in range(3):
    s_cnnlstm = torch.randn(SIZE_BATCH, 2, 16)
    s_dqn, s_dqn_next = torch.randn(SIZE_BATCH, 3), torch.randn(SIZE_BATCH, 3)
    a_dqn, r = torch.randint(0, 4, (SIZE_BATCH, 1)), torch.randn(SIZE_BATCH, 1)
    # dqn
    s_cnnlstm_out, _, _ = model.forward_cnnlstm(s_cnnlstm, flag_optim=True)
    q_eval_dqn = model.forward_dqn_eval(s_dqn, s_cnnlstm_out).gather(1, a_dqn)
    q_next_dqn = model.forward_dqn_target(s_dqn_next, s_cnnlstm_out).detach()
    q_target_dqn = r + GAMMA_DQN * q_next_dqn.max(dim=1)[0].reshape(SIZE_BATCH, 1)
    loss_dqn = loss_dqn_fn(q_eval_dqn, q_target_dqn)
    optimizer_cnnlstm.zero_grad()
    optimizer_dqn.zero_grad()
    loss_dqn.backward()  # expect: frees
    optimizer_cnnlstm.step()
    optimizer_dqn.step()
    # ddpg actor
    s_cnnlstm_out, _, _ = model.forward_cnnlstm(s_cnnlstm, flag_optim=True)
    a = model.forward_actor(s_dqn, s_cnnlstm_out)
    loss_ddpg_actor = -model.forward_critic(s_dqn, a, s_cnnlstm_out).mean()
    optimizer_cnnlstm.zero_grad()
    optimizer_actor.zero_grad()
    loss_ddpg_actor.backward()  # expect: raises
    optimizer_cnnlstm.step()
    optimizer_actor.step()
    print('episode', episode, loss_dqn.item(), loss_ddpg_actor.item())
